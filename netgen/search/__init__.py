"""Research tooling for shallower selection networks (issue 12): a SAT
model of small selection problems (:mod:`.select_sat`). Optional: needs
python-sat (the ``search`` extra); nothing in ``netgen build`` uses it."""
