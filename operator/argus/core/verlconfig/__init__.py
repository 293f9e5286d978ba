"""verl configuration: composed with verl's own config tree, resolved, then checked."""
