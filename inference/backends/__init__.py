"""Model backends behind inference.backend.Backend."""
