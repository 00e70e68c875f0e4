"""End-to-end: the manager's controllers, the local cluster and the CLIs together, as a user runs them."""
