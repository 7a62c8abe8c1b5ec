"""Reference copies of the simulator's compiled kernels, in plain numpy / Python.

The package (``libra_des``) holds one implementation of every algorithm, its numba kernel;
these slower, plainer forms exist only for the tests that compare the two (agreement within
a tolerance, or exactly where both are integer arithmetic).
"""
