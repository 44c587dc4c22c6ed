"""Research tooling for shallower selection networks (issues 12 and 22):

* :mod:`.select_sat`: the plain SAT model of small selection problems
  (rank r on wire r by layer d_r; generalized comparators);
* :mod:`.select_depth`: the optimal-depth search with symmetry breaking
  (standard comparators, maximal first layer, second layer up to symmetry)
  that produced the record table (``tools/records/records.py``,
  ``docs/records.md``), also for single ranks and the unsorted top k;
* :mod:`.masks`: 0-1 inputs as bit masks, a correctness test and a greedy
  shrink.

Optional: the SAT parts need python-sat (the ``search`` extra). ``netgen
build`` never runs a solver; it only reads the shipped record table.
"""
