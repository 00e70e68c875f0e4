"""Small pure helpers shared by every layer: selectors, conditions, time. No I/O here."""
