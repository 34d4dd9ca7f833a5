"""Building and loading the knowledge base."""
