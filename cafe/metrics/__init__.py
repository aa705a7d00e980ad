"""Metrics over run folders: accuracy, CAFE perception, decay, attention, statistics."""
