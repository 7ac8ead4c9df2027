"""`tf.distribute` strategies and clusters: roles, peers, replica sessions."""
