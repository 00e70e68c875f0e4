"""What tests across the suite share: waiting for a state (`waiting`) and object builders (`objects`)."""
