"""Developer tools: process replay (kernel capture and comparison)."""
