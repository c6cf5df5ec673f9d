"""The paper's evaluation (`animegamer eval`): play held-out games through the worker's backends and
score them on Table 1's metrics."""
