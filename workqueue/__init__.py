"""workqueue."""
