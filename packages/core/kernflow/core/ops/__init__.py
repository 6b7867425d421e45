"""Op families: each module declares its OpDefs (with shape functions and docs) and the user wrappers."""
