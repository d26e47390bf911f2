// Package tes is the project's GA4GH TES 1.1 API (ga4gh/task-execution-schemas,
// tag v1.1): the access control, the validation and conversion of a
// submitted tesTask into the taskmaster's task JSON, and the HTTP handlers
// that write a task's anchor, post its CloudEvents and read its state back
// from the cluster. The specification's types, states and views are package
// tesv1's.
package tes
