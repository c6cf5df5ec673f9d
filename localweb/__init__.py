"""What the project's local web pages share (the play page, play/; the film review page,
film/review/): the guard that keeps a page served on this machine to itself (localweb.guard) and
the JSON shape of every refusal (localweb.errors). It imports nothing of the project, so every
page may use it whatever its layer (the film pipeline may not import the game's)."""
