"""Placement decisions: which worker may run an execution, and which one does."""
