"""The search domain: a real search engine over a real documentation corpus (in progress)."""
