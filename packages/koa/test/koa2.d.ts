// Koa 2 is installed under an alias beside Koa 3, so that one suite runs against both.
declare module 'koa2' {
  import Koa from 'koa';
  export default Koa;
}
