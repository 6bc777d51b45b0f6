"""News providers (offline headline files, RSS, Tavily) and the sentiment/tag scoring of headlines."""
