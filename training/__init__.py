"""Training a film (`animegamer train`): the three AnimeGamer phases on accelerate, from the film
pipeline's training set to weights the worker plays."""
