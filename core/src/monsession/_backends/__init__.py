"""The execution backends: graph and eager steps, fusion and the owned step."""
