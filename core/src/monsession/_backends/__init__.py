"""The execution backends: graph and eager steps, fusion, the owned step and epochs."""
