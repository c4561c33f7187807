"""Adapters that let other frameworks use rag's index (imported only by their users)."""
