"""rbl: controlled, repeatable benchmarks of microservice resiliency patterns."""

__version__ = "0.1.0"
