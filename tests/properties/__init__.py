"""Property-based tests: mathematical facts every component must satisfy, on drawn inputs."""
