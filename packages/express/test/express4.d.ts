// Express 4 is installed under an alias beside Express 5, so that one suite runs against both.
declare module 'express4' {
  import express from 'express';
  export default express;
}
