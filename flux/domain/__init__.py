"""Domain vocabulary shared by the server, the worker and workflow code."""

