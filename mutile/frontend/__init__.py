"""mutile.frontend"""
