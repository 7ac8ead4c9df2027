"""`tf.distribute` strategies: roles, peers, replica sessions, training under a strategy."""
