"""Tables played without a casino: the simulator and its adversaries, the honest player populations, the
monitor's evaluation (``monitor-eval``) and one disputed bet replayed through the real processors
(``settle``)."""
