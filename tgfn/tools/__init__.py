"""Developer tools: process replay (kernel capture and comparison), the transcendental ulp table."""
