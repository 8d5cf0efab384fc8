"""Statements after the wire: routing, session state, SET/SHOW/transaction commands, SQL text helpers and execution."""
