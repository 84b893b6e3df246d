"""mutile.language"""
