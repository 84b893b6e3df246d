"""mutile.runtime"""
