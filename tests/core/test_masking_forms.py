"""``core.masking``: a configured secret is masked in every form a provider or an encoder may
give it (property tests: Hypothesis generates the secrets, the forms and the text around them),
and ordinary text is never touched."""

from __future__ import annotations

import base64
import json
import string
from pathlib import Path
from urllib.parse import quote

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core import masking
from core.masking import MASK, MIN_SECRET_LENGTH, RUN_LENGTH, SecretMasker, base64_cores

REPO = Path(__file__).resolve().parents[2]
#: Characters keys are made of (providers' keys, passwords, tokens), separators included.
KEY_ALPHABET = string.ascii_letters + string.digits + "-_"
#: Text around a form: letters, digits, punctuation and white space, as reports and errors have.
AROUND = st.text(alphabet=string.ascii_letters + string.digits + " .,:;-_/()\"'\n", max_size=40)
SEPARATORS = ["", " ", "-", ".", "\t", "\n"]


def _significant(value: str) -> str:
    return "".join(c for c in value if c not in "-. \t\n\r")


keys = st.text(alphabet=KEY_ALPHABET, min_size=RUN_LENGTH + 1, max_size=48).filter(
    lambda k: len(_significant(k)) >= MIN_SECRET_LENGTH and any(c.isalpha() for c in k)
)


@st.composite
def spaced(draw: st.DrawFn, key: str) -> str:
    """``key`` with separators inserted: at most one between two of its characters, and at its
    own separators the separator with a space on either side or dropped."""
    out: list[str] = []
    for i, char in enumerate(key):
        if char in "-.":
            out.append(draw(st.sampled_from([char, f" {char} ", "", " "])))
            continue
        if i and key[i - 1] not in "-.":
            out.append(draw(st.sampled_from(SEPARATORS)))
        out.append(char)
    return "".join(out)


@st.composite
def embedded_base64(draw: st.DrawFn, key: str) -> tuple[str, str]:
    """``(name, text)``: ``key`` inside a larger blob (0-5 random bytes before and after, so it
    starts at every alignment), base64'd with the standard or the URL-safe alphabet."""
    before = draw(st.binary(max_size=5))
    after = draw(st.binary(max_size=5))
    urlsafe = draw(st.booleans())
    blob = before + key.encode() + after
    encoded = (base64.urlsafe_b64encode if urlsafe else base64.b64encode)(blob).decode()
    return f"base64 {'url-safe' if urlsafe else 'standard'} at offset {len(before) % 3}", encoded


@st.composite
def forms(draw: st.DrawFn) -> tuple[str, str, str]:
    """``(key, form name, form text)`` for a generated key."""
    key = draw(keys)
    kind = draw(
        st.sampled_from(
            ["exact", "spaced", "reversed", "base64", "hex", "HEX", "url", "json", "run", "json-spaced"]
        )
    )
    if kind == "exact":
        return key, kind, key
    if kind == "spaced":
        return key, kind, draw(spaced(key))
    if kind == "json-spaced":  # a spaced-out form inside JSON text: its newlines are \n
        return key, kind, json.dumps({"error": draw(spaced(key))})
    if kind == "reversed":
        return key, kind, key[::-1]
    if kind == "base64":
        name, text = draw(embedded_base64(key))
        return key, name, text
    if kind in ("hex", "HEX"):
        hexed = key.encode().hex()
        return key, kind, hexed if kind == "hex" else hexed.upper()
    if kind == "url":
        return key, kind, quote(key, safe="")
    if kind == "json":
        return key, kind, json.dumps(key)[1:-1]
    start = draw(st.integers(0, len(key) - RUN_LENGTH))
    end = draw(st.integers(start + RUN_LENGTH, len(key)))
    return key, f"run {start}:{end}", key[start:end]


def _left(key: str, text: str) -> list[str]:
    """What of ``key`` is still readable in ``text``: the key, any run of :data:`RUN_LENGTH` of
    its characters, its reversal, hex, and base64 at any alignment."""
    found = [
        key[i : i + RUN_LENGTH] for i in range(len(key) - RUN_LENGTH + 1) if key[i : i + RUN_LENGTH] in text
    ]
    found += [f for f in (key[::-1], key.encode().hex(), key.encode().hex().upper()) if f in text]
    found += [core for core in base64_cores(key) if core in text]
    if _significant(key) in text.replace(" ", "").replace("-", "").replace(".", "").replace("\\n", ""):
        found.append("the key with separators")
    return found


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(forms(), AROUND, AROUND)
def test_every_form_of_a_secret_is_masked_whatever_surrounds_it(
    case: tuple[str, str, str], before: str, after: str
) -> None:
    key, name, form = case
    masker = SecretMasker([key])
    text = f"{before}{form}{after}"
    masked = masker.mask_text(text)
    assert MASK in masked, (name, form)
    assert _left(key, masked) == [], (name, form, masked)


@settings(max_examples=200, deadline=None)
@given(forms(), AROUND, AROUND)
def test_the_quick_search_agrees_with_the_masking(
    case: tuple[str, str, str], before: str, after: str
) -> None:
    # found_in (one Hyperscan scan) says yes exactly when the spans (Python's search) find one
    key, _, form = case
    masker = SecretMasker([key])
    for text in (f"{before}{form}{after}", f"{before}{after}"):
        assert masker.found_in(text) == bool(masker.spans(text))


def test_a_run_of_the_secrets_own_separators_spaced_out_is_masked() -> None:
    # each of the key's own separators may come with a space on either side: "A--0" spaced out
    # is "A - - 0" (five separators) or "A- - 0" (four); both Hyperscan and Python's search
    # must allow that many (three per own separator), and ordinary text stays untouched
    key = "000000000000000000A--0"
    masker = SecretMasker([key])
    for form in ("00000000000 0000000A- - 0", "0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 A - - 0", key):
        masked = masker.mask_text(f"error: {form} rejected")
        assert MASK in masked, form
        assert masker.found_in(form), form
        assert "A" not in masked, masked
    assert masker.mask_text("A ---- 0 and 12.5") == "A ---- 0 and 12.5"


def test_the_forms_of_the_issue_example_are_masked() -> None:
    key = "sk-test-SECRETVALUE-1234567890"
    masker = SecretMasker([key])
    for text in (
        " ".join(key),
        "c2stdGVzdC1TRUNSRVRWQUxVRS0xMjM0NTY3ODkw",
        key[::-1],
        key[:12],
        "Incorrect API key provided: sk-test-SECR…",
    ):
        assert masker.mask_text(text).count(MASK) == 1, text
        assert _left(key, masker.mask_text(text)) == []


# --- ordinary text is left alone --------------------------------------------------------------

CORPUS = "\n".join(p.read_text(encoding="utf-8") for p in sorted((REPO / "docs").glob("*.md")))


#: Keys as a generator of secrets makes them: uniformly random characters (Hypothesis varies the
#: seed, not the characters: shrinking characters would make "00000000", which the documentation
#: holds, and which no key generator makes).
random_keys = st.randoms(use_true_random=False).map(
    lambda r: "".join(
        r.choice(string.ascii_letters + string.digits) for _ in range(r.randint(MIN_SECRET_LENGTH, 40))
    )
)


@settings(max_examples=100, deadline=None)
@given(random_keys)
def test_random_keys_leave_the_documentation_unchanged(key: str) -> None:
    # ~1 MB of prose, tables, numbers, commands and JSON: none of it is a key's form, so none
    # of it is masked, whatever the key (the pieces are 12 characters, the whole forms longer)
    masker = SecretMasker([key])
    assert masker.mask_text(CORPUS) is CORPUS


@pytest.mark.parametrize("short", ["hunter22", "p4ssw0rd-x", "abcdefghijk"])
def test_a_secret_of_at_most_12_characters_is_masked_whole_never_in_pieces(short: str) -> None:
    masker = SecretMasker([short])
    assert masker.mask_text(f"x {short} y") == f"x {MASK} y"
    piece = short[: MIN_SECRET_LENGTH - 1] + "!"
    assert masker.mask_text(f"x {piece} y") == f"x {piece} y"


def test_a_digits_only_secret_is_not_matched_in_numbers_with_separators() -> None:
    masker = SecretMasker(["12345678"])
    assert masker.mask_text("close 1234.5678 and 1234-5678") == "close 1234.5678 and 1234-5678"
    assert masker.mask_text("pin 12345678") == f"pin {MASK}"


def test_two_occurrences_next_to_each_other_are_two_masks_and_a_long_run_one() -> None:
    key = "sk-test-SECRETVALUE-1234567890"
    masker = SecretMasker([key])
    assert masker.mask_text(key + key) == MASK + MASK
    assert masker.mask_text(f"<{key[3:25]}>") == f"<{MASK}>"


def test_without_hyperscan_the_same_answers(monkeypatch: pytest.MonkeyPatch) -> None:
    key = "sk-test-SECRETVALUE-1234567890"
    texts = [" ".join(key), base64.b64encode(b"xy" + key.encode()).decode(), key[5:19], "plain text"]
    with_library = [SecretMasker([key]).mask_text(t) for t in texts]
    monkeypatch.setattr(masking, "hyperscan", None)
    masking._compile.cache_clear()
    try:
        fallback = SecretMasker([key])
        assert [fallback.mask_text(t) for t in texts] == with_library
    finally:
        masking._compile.cache_clear()


def test_the_public_id_of_a_service_api_key_stays_readable() -> None:
    # a process with one of this service's keys in its environment (FINAGENT_FUZZ_API_KEY, a
    # client's *_API_KEY): the key, and any 12 characters of its secret part, are masked; its
    # public id (which names it in lists and logs, and finds its row) is not
    key = "fa_1a2b3c4d5e6f_Q2x9-abcDEFghiJKLmnoPQRstuVWXyz012345_678"
    masker = SecretMasker([key])
    assert masker.mask_text(f"key {key} used") == f"key {MASK} used"
    assert masker.mask_text("WHERE key_id = 1a2b3c4d5e6f") == "WHERE key_id = 1a2b3c4d5e6f"
    assert masker.mask_text("audit: fa_1a2b3c4d5e6f_…") == "audit: fa_1a2b3c4d5e6f_…"
    assert masker.mask_text(f"piece {key[20:34]}") == f"piece {MASK}"
