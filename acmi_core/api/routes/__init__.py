"""HTTP routes, one module per Lambda function."""
