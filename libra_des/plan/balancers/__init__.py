"""The training balancers: their registry (``registry``) and the shipped ones, one module each
(``shipped`` lists them)."""
