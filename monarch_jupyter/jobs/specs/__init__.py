"""What ``%job apply`` was asked to apply: the kinds (:mod:`.base`), ``--local``
(:mod:`.local`), ``--ssh`` (:mod:`.ssh`) and the one dispatcher (:mod:`.parse`).

Pure code: no Monarch import, no IPython.
"""
