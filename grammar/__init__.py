"""Grammar files of mutile (package data: tile_ir.lark, musa_asm.lark)."""
