"""The commands that run and judge many transcripts: compare, check and tune.

``compare`` runs policies x swept values x transcripts in worker processes (``pool``) or on a Dask
cluster, ``verdict`` says which policy to use, ``check`` holds runs against a committed baseline,
``tune`` searches a policy's keys with Optuna, and ``calibration`` fits the token estimate to a
transcript's recorded usage. What a run is judged by is ``compactlab.metrics``.
"""
