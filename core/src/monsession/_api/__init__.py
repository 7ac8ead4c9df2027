"""The hook API: what every hook is written against."""
