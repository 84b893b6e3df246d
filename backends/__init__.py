"""Code-generation backends for mutile."""
