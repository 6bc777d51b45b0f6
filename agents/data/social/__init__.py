"""Social posts (cash-tagged tweets) as a data source: :mod:`agents.data.social.posts`."""
