"""Workflow bundles: a project (a file, a directory, a wheel) as one content-addressed zip.

``archive``: checking, reading and unpacking a bundle (server, worker, client);
``build``: making one from a path on the client (ignore files, symlinks, determinism).
"""
