"""localcluster."""
