"""controller_manager."""
