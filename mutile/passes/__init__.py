"""mutile.passes"""
