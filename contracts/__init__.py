"""The turn's contracts, shared by the database and inference layers: the request a backend
receives, the result it returns, the history it sees, and the stored form of a representation."""
