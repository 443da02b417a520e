"""Generator service: answers with checked citations."""
