"""The values that cross core's seams, named once for every module.

TensorFlow has no type stubs, so its tensors and functions are `Any` to the
type checker. The values below are open by nature (a user's nested fetches,
a hook's saved state): each alias is `object`, which the checker makes every
use narrow, and its name says what the value is. Nothing here imports
TensorFlow.
"""

from __future__ import annotations

from typing import TypeAlias

Fetches: TypeAlias = object
"""What a run fetches.

Graph mode: a tensor, an operation or its name, or a nested structure of
them (lists, tuples, namedtuples, dicts). Eager mode: the step, a callable
or a nested structure whose leaves are callables, variables or tensors.
"""

Results: TypeAlias = object
"""What a run gives back for its `Fetches`, in their structure."""

FeedKey: TypeAlias = object
"""A key of a run's feeds: a tensor or its name (graph), a keyword (eager)."""

FeedValue: TypeAlias = object
"""A value fed to a run: under a `FeedKey`, or as an argument of the step."""

HookState: TypeAlias = object
"""A hook's `state_dict()`: a value that `json.dumps` writes and `json.loads` gives back."""

Unchecked: TypeAlias = object
"""A value as a user or a plugin gave it, before the function that takes it checks it."""
