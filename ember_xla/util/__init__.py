"""Small shared helpers: atomic file writes, garbage-collector pauses."""
